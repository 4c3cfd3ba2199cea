module.exports = { ...require('../../jest.preset.cjs'), displayName: 'db-migrations', rootDir: __dirname };
