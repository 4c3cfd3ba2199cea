module.exports = { ...require('../../jest.preset.cjs'), displayName: 'ngram', rootDir: __dirname };
