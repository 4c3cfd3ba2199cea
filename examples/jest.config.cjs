module.exports = { ...require('../jest.preset.cjs'), displayName: 'examples', rootDir: __dirname };
