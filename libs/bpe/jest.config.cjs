module.exports = { ...require('../../jest.preset.cjs'), displayName: 'bpe', rootDir: __dirname };
