// The dashboard build: web/ -> dist/dashboard/ (index.html + assets/ with hashed names), which
// the daemon serves under `/`. The daemon's Content-Security-Policy allows no inline script or
// style, so nothing may be inlined: no data: URLs for assets, no inline module-preload helper.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const outDir = process.env.MAILGATE_DASHBOARD_OUT ?? fileURLToPath(new URL('../dist/dashboard/', import.meta.url));

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/',
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir,
    emptyOutDir: true,
    target: 'es2022',
    assetsInlineLimit: 0,
    cssCodeSplit: false,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
    sourcemap: false,
  },
});
