import type { PrismaClient } from '@atelier/db';
import { uniqueName } from '@atelier/testing';

/** A fresh namespace with a balance, and its balance as exact decimal strings, for the ledger specs. */
export function ledgerFixtures(prisma: () => PrismaClient) {
  return {
    namespaceWith: async (credits: string) => (await prisma().namespace.create({ data: { name: uniqueName('ns'), type: 'org', credits } })).id,
    row: async (id: string) => {
      const ns = await prisma().namespace.findUniqueOrThrow({ where: { id } });
      return { credits: ns.credits.toFixed(), reserved: ns.reserved.toFixed() };
    },
  };
}
