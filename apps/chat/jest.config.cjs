module.exports = { ...require('../../jest.preset.cjs'), displayName: 'chat', rootDir: __dirname };
