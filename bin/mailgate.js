#!/usr/bin/env node
// mailgate runs its TypeScript sources directly through tsx (no build step).
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
