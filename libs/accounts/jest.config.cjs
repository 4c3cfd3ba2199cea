module.exports = { ...require('../../jest.preset.cjs'), displayName: 'accounts', rootDir: __dirname };
