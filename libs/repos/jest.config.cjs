module.exports = { ...require('../../jest.preset.cjs'), displayName: 'repos-lib', rootDir: __dirname };
