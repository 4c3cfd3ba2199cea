module.exports = { ...require('../../jest.preset.cjs'), displayName: 'events-lib', rootDir: __dirname };
