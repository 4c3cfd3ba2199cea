module.exports = { ...require('../../jest.preset.cjs'), displayName: 'safe-fetch', rootDir: __dirname };
