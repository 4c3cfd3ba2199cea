module.exports = { ...require('../../jest.preset.cjs'), displayName: 'batch-lib', rootDir: __dirname };
