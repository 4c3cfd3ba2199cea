export {
  fetchMedia,
  guardedPost,
  type GuardedPostOptions,
  MediaFetchError,
  displayUrl,
  httpStatusMessage,
  type FetchMediaOptions,
  type FetchedMedia,
  type MediaFetchFailure,
} from './fetch-media';
export { blockedRange, isAllowedHost, isIpLiteral } from './address-policy';
export { sniffMediaType, effectiveType, matchesAccept } from './media-type';
