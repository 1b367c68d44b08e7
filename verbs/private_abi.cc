// IBVERBS_PRIVATE_34: the ABI between rdma-core's libibverbs and its kernel-device providers
// (libmlx5, libefa, ... and DPDK's mlx PMDs link against it). Stock binaries such as perftest
// load those libraries at start, and they bind every symbol at load time (BIND_NOW), so each
// must exist here. urnic has no kernel devices: no provider is ever handed one, so none of these
// is reached through urnic. Should a provider call one anyway, it fails with EOPNOTSUPP (the
// kernel command layer is absent), and a provider registering itself is accepted and ignored.
#include <cerrno>

extern "C" {

// Read by providers when a device is hot-unplugged; urnic devices never are.
bool verbs_allow_disassociate_destroy = false;

// A provider's constructor registers it; urnic enumerates its own devices instead.
void verbs_register_driver_34(const void*) {}

// Logging from providers: nothing to print, no provider runs.
void __verbs_log(void*, const char*, ...) {}

// A provider's context allocation: no device, no context.
void* _verbs_init_and_alloc_context(void*, int, unsigned long, unsigned long, int) {
  errno = EOPNOTSUPP;
  return nullptr;
}

#define URNIC_NO_KERNEL(name) \
  int name() {                \
    errno = EOPNOTSUPP;       \
    return EOPNOTSUPP;        \
  }

URNIC_NO_KERNEL(__ioctl_final_num_attrs)
URNIC_NO_KERNEL(execute_ioctl)
URNIC_NO_KERNEL(ibv_cmd_advise_mr)
URNIC_NO_KERNEL(ibv_cmd_alloc_dm)
URNIC_NO_KERNEL(ibv_cmd_alloc_mw)
URNIC_NO_KERNEL(ibv_cmd_alloc_pd)
URNIC_NO_KERNEL(ibv_cmd_attach_mcast)
URNIC_NO_KERNEL(ibv_cmd_close_xrcd)
URNIC_NO_KERNEL(ibv_cmd_create_ah)
URNIC_NO_KERNEL(ibv_cmd_create_counters)
URNIC_NO_KERNEL(ibv_cmd_create_cq)
URNIC_NO_KERNEL(ibv_cmd_create_cq_ex)
URNIC_NO_KERNEL(ibv_cmd_create_flow)
URNIC_NO_KERNEL(ibv_cmd_create_flow_action_esp)
URNIC_NO_KERNEL(ibv_cmd_create_qp)
URNIC_NO_KERNEL(ibv_cmd_create_qp_ex)
URNIC_NO_KERNEL(ibv_cmd_create_qp_ex2)
URNIC_NO_KERNEL(ibv_cmd_create_rwq_ind_table)
URNIC_NO_KERNEL(ibv_cmd_create_srq)
URNIC_NO_KERNEL(ibv_cmd_create_srq_ex)
URNIC_NO_KERNEL(ibv_cmd_create_wq)
URNIC_NO_KERNEL(ibv_cmd_dealloc_mw)
URNIC_NO_KERNEL(ibv_cmd_dealloc_pd)
URNIC_NO_KERNEL(ibv_cmd_dereg_mr)
URNIC_NO_KERNEL(ibv_cmd_destroy_ah)
URNIC_NO_KERNEL(ibv_cmd_destroy_counters)
URNIC_NO_KERNEL(ibv_cmd_destroy_cq)
URNIC_NO_KERNEL(ibv_cmd_destroy_flow)
URNIC_NO_KERNEL(ibv_cmd_destroy_flow_action)
URNIC_NO_KERNEL(ibv_cmd_destroy_qp)
URNIC_NO_KERNEL(ibv_cmd_destroy_rwq_ind_table)
URNIC_NO_KERNEL(ibv_cmd_destroy_srq)
URNIC_NO_KERNEL(ibv_cmd_destroy_wq)
URNIC_NO_KERNEL(ibv_cmd_detach_mcast)
URNIC_NO_KERNEL(ibv_cmd_free_dm)
URNIC_NO_KERNEL(ibv_cmd_get_context)
URNIC_NO_KERNEL(ibv_cmd_modify_cq)
URNIC_NO_KERNEL(ibv_cmd_modify_flow_action_esp)
URNIC_NO_KERNEL(ibv_cmd_modify_qp)
URNIC_NO_KERNEL(ibv_cmd_modify_qp_ex)
URNIC_NO_KERNEL(ibv_cmd_modify_srq)
URNIC_NO_KERNEL(ibv_cmd_modify_wq)
URNIC_NO_KERNEL(ibv_cmd_open_qp)
URNIC_NO_KERNEL(ibv_cmd_open_xrcd)
URNIC_NO_KERNEL(ibv_cmd_poll_cq)
URNIC_NO_KERNEL(ibv_cmd_post_recv)
URNIC_NO_KERNEL(ibv_cmd_post_send)
URNIC_NO_KERNEL(ibv_cmd_post_srq_recv)
URNIC_NO_KERNEL(ibv_cmd_query_context)
URNIC_NO_KERNEL(ibv_cmd_query_device_any)
URNIC_NO_KERNEL(ibv_cmd_query_mr)
URNIC_NO_KERNEL(ibv_cmd_query_port)
URNIC_NO_KERNEL(ibv_cmd_query_qp)
URNIC_NO_KERNEL(ibv_cmd_query_srq)
URNIC_NO_KERNEL(ibv_cmd_read_counters)
URNIC_NO_KERNEL(ibv_cmd_reg_dm_mr)
URNIC_NO_KERNEL(ibv_cmd_reg_dmabuf_mr)
URNIC_NO_KERNEL(ibv_cmd_reg_mr)
URNIC_NO_KERNEL(ibv_cmd_req_notify_cq)
URNIC_NO_KERNEL(ibv_cmd_rereg_mr)
URNIC_NO_KERNEL(ibv_cmd_resize_cq)
URNIC_NO_KERNEL(ibv_read_ibdev_sysfs_file)
URNIC_NO_KERNEL(verbs_init_cq)
URNIC_NO_KERNEL(verbs_open_device)
URNIC_NO_KERNEL(verbs_set_ops)
URNIC_NO_KERNEL(verbs_uninit_context)

}  // extern "C"
