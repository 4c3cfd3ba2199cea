import { z } from 'zod';
import { API_SHAPES } from '@atelier/contracts';

type Schema = Record<string, unknown>;

let generated: Record<string, Schema> | undefined;

/**
 * The document's response components, generated from the one declaration of each answer
 * (libs/contracts' API_SHAPES): a shape used inside another becomes a `$ref` to its component.
 * Generated when the document is first built (about 11 ms), not when the gateway loads.
 */
export function responseSchemas(): Record<string, Schema> {
  return (generated ??= generate());
}

function generate(): Record<string, Schema> {
  const registry = z.registry<{ id: string }>();
  for (const [id, shape] of Object.entries(API_SHAPES)) registry.add(shape, { id });
  const { schemas } = z.toJSONSchema(registry, { uri: (id) => `#/components/schemas/${id}`, io: 'output', unrepresentable: 'any' }) as { schemas: Record<string, Schema> };
  return Object.fromEntries(
    Object.entries(schemas).map(([id, schema]) => {
      const { $schema: _dialect, $id: _id, ...rest } = schema;
      return [id, rest];
    }),
  );
}
