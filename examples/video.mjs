// A short video, synchronously: the request waits for the render (real H.264 from ffmpeg).
//   node examples/video.mjs
import { api } from './connection.mjs';

const video = await api('POST', '/api/ai/videos/generate', {
  model: 'local-video',
  prompt: 'waves rolling onto a rocky shore at sunset',
  duration: 1,
  resolution: '480p',
});
console.log('video: temporary link', video.videos[0].url);
