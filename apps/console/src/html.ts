// JSX without a compile step: htm's tagged templates build Preact elements.
import { h } from 'preact';
import htm from 'htm';

export const html = htm.bind(h);
