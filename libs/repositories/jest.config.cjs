module.exports = { ...require('../../jest.preset.cjs'), displayName: 'repositories', rootDir: __dirname };
