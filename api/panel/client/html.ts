/** JSX-like templates without a build step: htm's tagged templates bound to Preact. */
import { h, type VNode } from 'preact';
import htm from 'htm';

export const html = htm.bind(h) as (strings: TemplateStringsArray, ...values: unknown[]) => VNode;
