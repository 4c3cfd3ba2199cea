/** The authenticated user behind a request. */
export interface Caller {
  userId: string;
  username: string;
  /** The namespace requests bill to by default: the user's own, or the org the key was made for. */
  namespaceId: string;
  namespace: string;
  /** 'org' when the key bills to an org by default. */
  namespaceType?: 'user' | 'org';
  keyPrefix: string;
  /** The key's row id (usage by key); absent only for callers made up in tests of older code. */
  keyId?: string;
  /** The key has a spending budget: its requests' reservations are held against it too. */
  hasBudget?: boolean;
  /** Requests in flight plus active generations: the key's own limit and its namespace's. */
  maxConcurrent?: number;
  namespaceMaxConcurrent?: number;
  /** What the key may be used for; empty: everything (ApiScope). */
  scopes?: readonly string[];
  /** When the key stops working (ms since the epoch); undefined: never. */
  expiresAt?: number;
  /** Requests per minute that create work or charge: the key's own limit and its namespace's (operator-set), when there are. */
  rpm?: number;
  namespaceRpm?: number;
  /** Every other request per minute (polls, lists, reads): the key's own limit and its namespace's, when there are. */
  readRpm?: number;
  namespaceReadRpm?: number;
  /** Chat tokens per minute: the key's own limit and its namespace's, when there are. */
  tpm?: number;
  namespaceTpm?: number;
  /** The key never has its requests stored (stored completions), whatever they or the namespace say. */
  storeRefused?: boolean;
  /** Share of chat completions billed to the key's namespace stored without store: true (its capture_rate). */
  captureRate?: number;
  /**
   * The limits of the keys that made this one (its maker first, then the maker's maker): its
   * requests, tokens and work in flight count against each of those keys' limits too.
   */
  makerLimits?: readonly MakerLimits[];
}

export interface MakerLimits {
  keyPrefix: string;
  rpm?: number;
  readRpm?: number;
  tpm?: number;
  maxConcurrent?: number;
}

/** A namespace the caller has been allowed to bill and write to. */
export interface NamespaceScope {
  id: string;
  name: string;
  type: 'user' | 'org';
}
