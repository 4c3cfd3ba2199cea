module.exports = { ...require('../../jest.preset.cjs'), displayName: 'event-stream', rootDir: __dirname };
