module.exports = { ...require('../../jest.preset.cjs'), displayName: 'engines', rootDir: __dirname };
