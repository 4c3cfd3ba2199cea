export { isPunctuation, isSentenceEnd, NGRAM_FORMAT, NgramCounts, parseNgramCounts, tokenizeWords, type NgramCountsJson } from './word-ngrams';
