module.exports = { ...require('../../jest.preset.cjs'), displayName: 'openapi', rootDir: __dirname };
