// The label selector of the CRI list filters: every given key must be present with that value.
export function matchesLabels(labels: Record<string, string>, selector: Record<string, string> | undefined): boolean {
  if (!selector) return true;
  for (const [key, value] of Object.entries(selector)) if (labels[key] !== value) return false;
  return true;
}
