import { ApiError } from '@atelier/contracts';
import { isScriptType, SCRIPT_TYPES, SUPPORTED_BASE_MODELS, type ScriptType } from './base-models';
import { validateTrainingParams, type FieldProblem } from './training-params';

export interface CreateFineTuneRequest {
  name?: string;
  resource: string;
  /** Branch and path inside the repository, split from `resource`. */
  branch: string;
  path: string;
  base_model: string;
  script_type: ScriptType;
  training_params: Record<string, unknown>;
}

const TOP_LEVEL = ['name', 'resource', 'base_model', 'script_type', 'training_params'];
const RESOURCE_PATTERN = /^([A-Za-z0-9][A-Za-z0-9._-]{0,99})\/(.+\.parquet)$/;
const typeName = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

/** `<branch>/<file>.parquet` split into branch and path, or a problem. */
export function parseResource(resource: string): { branch: string; path: string } | string {
  const m = RESOURCE_PATTERN.exec(resource);
  if (!m) return 'must be <branch>/<file>.parquet, e.g. main/train.parquet';
  const path = m[2];
  if (path.split('/').some((s) => s === '' || s === '.' || s === '..')) return "must not contain empty, '.' or '..' path segments";
  return { branch: m[1], path };
}

/** The 400 every create problem ends in: a readable summary plus the full list in `detail`. */
export function invalidFineTune(problems: FieldProblem[]): ApiError {
  const summary = problems
    .slice(0, 5)
    .map((p) => `${p.field} ${p.message}`)
    .join('; ');
  const more = problems.length > 5 ? ` (and ${problems.length - 5} more)` : '';
  return ApiError.badRequest(`Invalid fine-tune: ${summary}${more}`, { fields: problems });
}

export interface ParsedCreateFineTune {
  /** Set only when the body has no problems. */
  request?: CreateFineTuneRequest;
  problems: FieldProblem[];
  /** What could be understood despite problems, so the dataset can still be checked. */
  resource?: { branch: string; path: string };
  scriptType?: ScriptType;
  params: Record<string, unknown>;
}

/**
 * Validates a create body and fills in defaults, collecting every problem instead of stopping
 * at the first, so the caller can add the dataset's problems and answer once.
 */
export function parseCreateFineTune(body: unknown): ParsedCreateFineTune {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw ApiError.badRequest('Request body must be a JSON object');
  const b = body as Record<string, unknown>;
  const problems: FieldProblem[] = [];
  for (const key of Object.keys(b)) if (!TOP_LEVEL.includes(key)) problems.push({ field: key, message: 'is not a known field' });

  if (b.name !== undefined && (typeof b.name !== 'string' || b.name.trim() === '' || b.name.length > 200))
    problems.push({ field: 'name', message: 'must be a non-empty string of at most 200 characters' });

  let resource: { branch: string; path: string } | undefined;
  if (typeof b.resource !== 'string') problems.push({ field: 'resource', message: b.resource === undefined ? 'is required' : `must be a string, got ${typeName(b.resource)}` });
  else {
    const parsed = parseResource(b.resource);
    if (typeof parsed === 'string') problems.push({ field: 'resource', message: parsed });
    else resource = parsed;
  }

  let scriptType: ScriptType | undefined;
  if (b.script_type === undefined) problems.push({ field: 'script_type', message: 'is required' });
  else if (!isScriptType(b.script_type)) problems.push({ field: 'script_type', message: `must be one of ${SCRIPT_TYPES.join(', ')}` });
  else scriptType = b.script_type;

  if (typeof b.base_model !== 'string') problems.push({ field: 'base_model', message: b.base_model === undefined ? 'is required' : `must be a string, got ${typeName(b.base_model)}` });
  else if (scriptType && !(SUPPORTED_BASE_MODELS[scriptType] as readonly string[]).includes(b.base_model))
    problems.push({
      field: 'base_model',
      message: `'${b.base_model}' is not supported for script_type ${scriptType}; supported base models: ${SUPPORTED_BASE_MODELS[scriptType].join(', ')}`,
    });

  let params: Record<string, unknown> = {};
  if (scriptType) {
    const checked = validateTrainingParams(scriptType, b.training_params);
    problems.push(...checked.problems);
    params = checked.params;
  } else if (b.training_params === undefined) problems.push({ field: 'training_params', message: 'is required' });

  if (problems.length) return { problems, resource, scriptType, params };
  return {
    problems,
    resource,
    scriptType,
    params,
    request: {
      name: typeof b.name === 'string' ? b.name.trim() : undefined,
      resource: b.resource as string,
      branch: resource!.branch,
      path: resource!.path,
      base_model: b.base_model as string,
      script_type: scriptType!,
      training_params: params,
    },
  };
}
