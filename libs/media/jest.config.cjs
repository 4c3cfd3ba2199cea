module.exports = { ...require('../../jest.preset.cjs'), displayName: 'media-lib', rootDir: __dirname };
