module.exports = { ...require('../../jest.preset.cjs'), displayName: 'idempotency', rootDir: __dirname };
