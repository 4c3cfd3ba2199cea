export * from './error-envelope';
export * from './queue-contracts';
export * from './broadcast-channels';
export * from './admin-dto';
export * from './health';
export * from './repository-dto';
export * from './api-instant';
export type { UploadItem } from './upload-item';
export { IMAGE_STYLE_FORMAT, parseImageStyle, type ImageStyle } from './image-style';
