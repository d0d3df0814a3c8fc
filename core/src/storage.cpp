// StorageImpl: owns device bytes and keeps the memory counters honest.
#include "brisk/core/storage.h"

#include "brisk/core/profiler.h"
#include "brisk/util/error.h"

namespace brisk {

StorageImpl::StorageImpl(size_t nbytes, Device device, MemoryCategory category)
    : nbytes_(nbytes), device_(device), category_(category), allocator_(allocator_for(device)) {
  allocate_again();
}

StorageImpl::StorageImpl(size_t nbytes, Device device, MemoryCategory category, Allocator* allocator)
    : nbytes_(nbytes), device_(device), category_(category), allocator_(allocator) {
  BRISK_CHECK(allocator != nullptr && allocator->device().kind == device.kind, "Storage: allocator for ",
              allocator ? allocator->device().str() : std::string("nothing"), " cannot serve ", device.str());
  allocate_again();
}

StorageImpl::~StorageImpl() {
  release();
}

void StorageImpl::set_category(MemoryCategory c) {
  if (c == category_) return;
  if (data_) {
    detail::count_alloc(device_.kind, category_, -static_cast<int64_t>(nbytes_));
    detail::count_alloc(device_.kind, c, static_cast<int64_t>(nbytes_));
  }
  category_ = c;
}

void StorageImpl::release() {
  if (!data_) return;
  allocator_->deallocate(data_, nbytes_);
  detail::count_alloc(device_.kind, category_, -static_cast<int64_t>(nbytes_));
  data_ = nullptr;
}

void StorageImpl::allocate_again() {
  if (data_ || nbytes_ == 0) return;
  data_ = allocator_->allocate_on(device_, nbytes_);
  detail::count_alloc(device_.kind, category_, static_cast<int64_t>(nbytes_));
  if (profiler::enabled()) [[unlikely]]
    profiler::detail::on_alloc(static_cast<int64_t>(nbytes_));
}

}  // namespace brisk
