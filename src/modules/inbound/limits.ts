// The inbound size limit's default, shared by the configuration (MAILGATE_INBOUND_MAX_BYTES)
// and the watcher's options. No imports: the configuration reads it at every start-up.
export const INBOUND_MAX_BYTES_DEFAULT = 2 * 1024 * 1024;
