#!/usr/bin/env node
import { generatePrismaClient } from './bootstrap.mjs';

generatePrismaClient();
