/**
 * Sets each field of `changes` that is not `undefined` on `target` (undefined: left as it is;
 * null clears). For the named transitions that change a loaded entity from a built change set
 * (campaigns' updateCampaign, sdrs' updateProfile): the keys are the change set's type.
 */
export function applyChanges<T extends object>(target: T, changes: Partial<T>): void {
  for (const key of Object.keys(changes) as Array<keyof T>) {
    const value = changes[key];
    if (value !== undefined) target[key] = value as T[keyof T];
  }
}
