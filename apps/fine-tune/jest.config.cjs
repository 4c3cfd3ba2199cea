module.exports = { ...require('../../jest.preset.cjs'), displayName: 'fine-tune', rootDir: __dirname };
