module.exports = { ...require('../../jest.preset.cjs'), displayName: 'generations', rootDir: __dirname };
