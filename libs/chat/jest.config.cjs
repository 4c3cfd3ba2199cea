module.exports = { ...require('../../jest.preset.cjs'), displayName: 'chat-lib', rootDir: __dirname };
