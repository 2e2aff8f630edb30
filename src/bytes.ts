const UNITS: Record<string, number> = { '': 1, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 };

/**
 * Parses a memory size the way Docker's --memory does: plain bytes, or a whole number with a
 * k, m or g suffix (binary multiples, case-insensitive, optional trailing "b"). Returns undefined
 * for anything else.
 */
export function parseByteSize(text: string): number | undefined {
  const match = /^(\d+)\s*([kmg]?)b?$/i.exec(text.trim());
  if (!match) return undefined;
  const bytes = Number(match[1]) * UNITS[match[2]!.toLowerCase()]!;
  return Number.isSafeInteger(bytes) ? bytes : undefined;
}
