import { z } from 'zod';

/** POST /api/repos; also the source of its OpenAPI request schema. */
export const CreateRepositoryRequest = z.strictObject({
  namespace: z.string({ error: 'namespace must be a string' }).min(1, 'namespace must not be empty'),
  name: z.string({ error: 'name must be a string' }).min(1, 'name must not be empty'),
  description: z.string({ error: 'description must be a string' }).max(2000, 'description must be at most 2000 characters').optional(),
});
export type CreateRepositoryRequest = z.infer<typeof CreateRepositoryRequest>;

/** POST /api/repos/{ns}/{repo}/branches. */
export const CreateBranchRequest = z.strictObject({
  name: z.string({ error: 'name must be a string' }).min(1, 'name must not be empty'),
  from: z.string({ error: 'from must be a string' }).optional(),
});
export type CreateBranchRequest = z.infer<typeof CreateBranchRequest>;
