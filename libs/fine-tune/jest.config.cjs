module.exports = { ...require('../../jest.preset.cjs'), displayName: 'fine-tune-lib', rootDir: __dirname };
