module.exports = { ...require('../../jest.preset.cjs'), displayName: 'queue-worker', rootDir: __dirname };
