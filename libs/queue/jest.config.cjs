module.exports = { ...require('../../jest.preset.cjs'), displayName: 'queue-lib', rootDir: __dirname };
