/**
 * Maps an edit prompt to real image operations. Each recognised phrase becomes one operation,
 * applied in the order it appears in the prompt ("rotate 90 degrees then make it grayscale").
 */
export type EditOperation =
  | { kind: 'grayscale' }
  | { kind: 'sepia' }
  | { kind: 'blur'; sigma: number }
  | { kind: 'sharpen' }
  | { kind: 'rotate'; degrees: number }
  | { kind: 'flip' }
  | { kind: 'flop' }
  | { kind: 'invert' }
  | { kind: 'brightness'; factor: number }
  | { kind: 'contrast'; factor: number }
  | { kind: 'saturation'; factor: number }
  | { kind: 'tint'; rgb: [number, number, number]; color: string }
  | { kind: 'crop'; aspect: { w: number; h: number } }
  | { kind: 'resize'; width?: number; height?: number; scale?: number }
  | { kind: 'pixelate' }
  | { kind: 'edges' };

export type CombineMode = 'blend' | 'horizontal' | 'vertical' | 'grid';

const TINTS: Readonly<Record<string, [number, number, number]>> = {
  red: [220, 40, 40], orange: [240, 140, 30], yellow: [240, 220, 40], green: [40, 180, 70], teal: [30, 160, 160], cyan: [40, 200, 220],
  blue: [40, 90, 220], navy: [20, 40, 120], purple: [140, 60, 200], violet: [150, 80, 220], magenta: [220, 40, 180], pink: [240, 130, 180],
  gold: [220, 180, 60], golden: [220, 180, 60], brown: [130, 80, 40],
};

interface Rule {
  pattern: RegExp;
  make: (m: RegExpExecArray) => EditOperation | undefined;
}

const intensity = (text: string, soft: number, normal: number, strong: number) =>
  /\b(slight(ly)?|subtle|a (little|bit)|gentl[ey]|soft(ly)?)\b/.test(text) ? soft : /\b(heav(y|ily)|strong(ly)?|very|lots|extreme(ly)?|much)\b/.test(text) ? strong : normal;

function rules(prompt: string): Rule[] {
  return [
    { pattern: /\b(gr[ae]y ?scale|black and white|black & white|b&w|monochrome|desaturate completely)\b/g, make: () => ({ kind: 'grayscale' }) },
    { pattern: /\b(sepia|vintage|old[- ]photo|antique)\b/g, make: () => ({ kind: 'sepia' }) },
    { pattern: /\b(blur(red|ry)?|soften|bokeh|out of focus)\b/g, make: () => ({ kind: 'blur', sigma: intensity(prompt, 1.2, 3, 8) }) },
    { pattern: /\b(sharpen(ed)?|crisp(er)?|more detail(ed)?)\b/g, make: () => ({ kind: 'sharpen' }) },
    {
      pattern: /\b(rotate[sd]?|turn(ed)?)\b(?:\s+(?:it|the|image|picture|photo|by))*\s*(-?\d{1,3})?\s*(?:°|deg(?:rees?)?)?\s*(clockwise|counter-?clockwise|anti-?clockwise|left|right)?/g,
      make: (m) => {
        if (!m[3] && !m[4] && /^turn/.test(m[1])) return undefined; // "turn it blue" is a tint, not a rotation
        let degrees = m[3] ? Number(m[3]) : 90;
        if (m[4] && /counter|anti|left/.test(m[4])) degrees = -degrees;
        return { kind: 'rotate', degrees: ((degrees % 360) + 360) % 360 };
      },
    },
    { pattern: /\bupside[- ]down\b/g, make: () => ({ kind: 'rotate', degrees: 180 }) },
    { pattern: /\b(flip(ped)? vertical(ly)?|vertical flip|flip(ped)? top to bottom)\b/g, make: () => ({ kind: 'flip' }) },
    { pattern: /\b(mirror(ed)?|flip(ped)?(?! vertical)(?: horizontal(ly)?)?|horizontal flip)\b/g, make: () => ({ kind: 'flop' }) },
    { pattern: /\b(invert(ed)?|negative|inverse colou?rs)\b/g, make: () => ({ kind: 'invert' }) },
    { pattern: /\b(bright(er|en|ened)?|lighten|lighter)\b/g, make: () => ({ kind: 'brightness', factor: intensity(prompt, 1.12, 1.3, 1.6) }) },
    { pattern: /\b(dark(er|en|ened)?|dim(mer)?)\b/g, make: () => ({ kind: 'brightness', factor: intensity(prompt, 0.88, 0.7, 0.45) }) },
    { pattern: /\b(more|increase[sd]?|high(er)?|boost(ed)?|add)\s+contrast\b/g, make: () => ({ kind: 'contrast', factor: intensity(prompt, 1.15, 1.35, 1.7) }) },
    { pattern: /\b(less|reduce[sd]?|low(er)?|decrease[sd]?)\s+contrast\b/g, make: () => ({ kind: 'contrast', factor: 0.7 }) },
    { pattern: /\b(saturate[sd]?|vivid|vibrant|more colou?rful|punchy)\b/g, make: () => ({ kind: 'saturation', factor: 1.6 }) },
    { pattern: /\b(desaturate[sd]?|muted|washed[- ]out|faded)\b/g, make: () => ({ kind: 'saturation', factor: 0.45 }) },
    {
      pattern: new RegExp(`\\b(?:(?:tint(?:ed)?|coloui?r(?:ize|ise)d?|make (?:it|everything|the image)|turn (?:it|everything|the image))\\s+(?:it\\s+)?(?:in\\s+)?(${Object.keys(TINTS).join('|')})|(${Object.keys(TINTS).join('|')})\\s+(?:tint|hue|filter|cast))\\b`, 'g'),
      make: (m) => {
        const color = m[1] ?? m[2];
        return { kind: 'tint', rgb: TINTS[color], color };
      },
    },
    {
      pattern: /\bcrop(?:ped)?\s+(?:it\s+)?(?:to\s+)?(?:an?\s+)?(?:(\d{1,2}):(\d{1,2})|(square)|(portrait)|(landscape|wide(?:screen)?))/g,
      make: (m) => ({
        kind: 'crop',
        aspect: m[1] ? { w: Number(m[1]), h: Number(m[2]) } : m[3] ? { w: 1, h: 1 } : m[4] ? { w: 3, h: 4 } : { w: 16, h: 9 },
      }),
    },
    { pattern: /\bsquare crop\b/g, make: () => ({ kind: 'crop', aspect: { w: 1, h: 1 } }) },
    {
      pattern: /\b(?:resize[sd]?|scale[sd]?)\s+(?:it\s+)?(?:to\s+)?(\d{2,4})\s*(?:x|×|by)\s*(\d{2,4})\b/g,
      make: (m) => ({ kind: 'resize', width: Number(m[1]), height: Number(m[2]) }),
    },
    { pattern: /\b(?:resize[sd]?|scale[sd]?)\s+(?:it\s+)?(?:to\s+)?(\d{2,4})\s*(?:px|pixels)?\s+wide\b/g, make: (m) => ({ kind: 'resize', width: Number(m[1]) }) },
    { pattern: /\b(half (?:the )?size|downscale[sd]?|shrink|smaller)\b/g, make: () => ({ kind: 'resize', scale: 0.5 }) },
    { pattern: /\b(double (?:the )?size|upscale[sd]?|enlarge[sd]?|2x|bigger)\b/g, make: () => ({ kind: 'resize', scale: 2 }) },
    { pattern: /\b(pixel(ate[sd]?|ated|art)|8-?bit|mosaic)\b/g, make: () => ({ kind: 'pixelate' }) },
    { pattern: /\b(edges?|edge detection|sketch|outline|line art|pencil drawing)\b/g, make: () => ({ kind: 'edges' }) },
  ];
}

/** The operations a prompt asks for, in prompt order; empty when nothing is recognised. */
export function parseEditPrompt(prompt: string): EditOperation[] {
  const text = prompt.toLowerCase();
  const found: { index: number; op: EditOperation }[] = [];
  const taken: [number, number][] = [];
  for (const rule of rules(text)) {
    for (const m of text.matchAll(rule.pattern)) {
      const start = m.index ?? 0;
      const end = start + m[0].length;
      // A phrase belongs to one rule only ("flip vertically" is not also a horizontal flip).
      if (taken.some(([s, e]) => start < e && end > s)) continue;
      const op = rule.make(m as RegExpExecArray);
      if (!op) continue;
      taken.push([start, end]);
      found.push({ index: start, op });
    }
  }
  return found.sort((a, b) => a.index - b.index).map((f) => f.op);
}

/** How several input images become one: blended, side by side, stacked or in a grid. */
export function combineMode(prompt: string, count: number): CombineMode {
  const text = prompt.toLowerCase();
  if (/\b(blend|merge|overlay|double exposure|mix|superimpose|fuse)\b/.test(text)) return 'blend';
  if (/\b(vertical(ly)?|stack(ed)?|top and bottom|one above)\b/.test(text)) return 'vertical';
  if (/\bgrid\b/.test(text) || count > 2) return 'grid';
  return 'horizontal';
}

export function describeOperation(op: EditOperation): string {
  switch (op.kind) {
    case 'rotate':
      return `rotate ${op.degrees}°`;
    case 'blur':
      return `blur σ=${op.sigma}`;
    case 'brightness':
    case 'contrast':
    case 'saturation':
      return `${op.kind} ×${op.factor}`;
    case 'tint':
      return `tint ${op.color}`;
    case 'crop':
      return `crop ${op.aspect.w}:${op.aspect.h}`;
    case 'resize':
      return op.scale ? `resize ×${op.scale}` : `resize ${op.width ?? 'auto'}x${op.height ?? 'auto'}`;
    default:
      return op.kind;
  }
}
