// Reference commit(n, k): n == k keeps the live state; 0 < n < k restores intermediates[n-1].
// Counterpart: cuda/copies.cu.
#include "reference/reference_backend.h"

namespace ssm::ref {

void ReferenceBackend::commit(int slot, int n, int k) {
  contract_.check_commit(slot, n, k);
  if (n < k) restore_live(slot, n);
}

}  // namespace ssm::ref
