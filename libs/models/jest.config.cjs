module.exports = { ...require('../../jest.preset.cjs'), displayName: 'models', rootDir: __dirname };
