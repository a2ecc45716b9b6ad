// The words the engine core draws generated tokens from, encoded with the server's tokenizer so that the
// output decodes to readable text (the engine itself knows token ids only).
import type { Tokenizer } from '../tokenize/types.js';

const WORDS = ('the of and to in is that for it as with was on be by this are or from at an but not have which one ' +
  'all were they there been has more if when will would who so no out up into time about can only other new some could ' +
  'these two may then first any like now my such make over our even most after also made many did before must through ' +
  'where much your way well down should because each just those people how too little state good very world still own ' +
  'see men work long here get both between life being under never day same another know while last might us great old ' +
  'year off come since against go came right used take three cache block engine token request prefix session router ' +
  'model batch queue latency memory transfer gateway stream').split(' ');

export function outputVocabulary (tk: Tokenizer): number[][] {
  const words: number[][] = [];
  for (const w of WORDS) {
    const ids = tk.encode(` ${w}`, { addSpecialTokens: false });
    if (ids.length > 0 && !ids.some((id) => tk.eosTokenIds.includes(id))) words.push(ids);
  }
  const period = tk.encode('.', { addSpecialTokens: false });
  if (period.length > 0) words.push(period);
  return words;
}
