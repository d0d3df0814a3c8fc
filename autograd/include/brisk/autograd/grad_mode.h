// Grad mode: whether ops record graph nodes on this thread.
#pragma once

namespace brisk {

bool is_grad_enabled();
void set_grad_enabled(bool enabled);

// Disables recording for a scope (inference, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Re-enables recording inside a NoGradGuard scope.
class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(is_grad_enabled()) { set_grad_enabled(true); }
  ~EnableGradGuard() { set_grad_enabled(prev_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace brisk
