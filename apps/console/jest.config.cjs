module.exports = { ...require('../../jest.preset.cjs'), displayName: 'console', rootDir: __dirname, roots: ['<rootDir>/e2e'] };
