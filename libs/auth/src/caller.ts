/** The authenticated user behind a request. */
export interface Caller {
  userId: string;
  username: string;
  /** The user's own namespace. */
  namespaceId: string;
  namespace: string;
  keyPrefix: string;
}

/** A namespace the caller has been allowed to bill and write to. */
export interface NamespaceScope {
  id: string;
  name: string;
  type: 'user' | 'org';
}
