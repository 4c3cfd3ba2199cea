module.exports = { ...require('../../jest.preset.cjs'), displayName: 'fine-tunes', rootDir: __dirname };
