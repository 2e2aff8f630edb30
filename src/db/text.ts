/**
 * The one rule for text from outside (a run's output, the engine's messages) on its way into a
 * PostgreSQL text column. PostgreSQL text holds every Unicode scalar value but U+0000, and a lone
 * UTF-16 surrogate has no UTF-8 form (the driver sends U+FFFD for it). A NUL fails the whole
 * statement: every run's output batched into it, or a run's end.
 */

/**
 * `text` as PostgreSQL text holds it: each U+0000 and each lone surrogate becomes U+FFFD, one UTF-16
 * code unit for one, so that its length, and every offset into it, stays as it was; anything else
 * (invalid UTF-8 is already U+FFFD once decoded) is kept as it is. Applying it twice changes nothing.
 */
export function storableText(text: string): string {
  return text.replaceAll('\u0000', '\uFFFD').toWellFormed();
}
