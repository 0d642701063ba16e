// SPDX-License-Identifier: GPL-2.0-only
/*
 * The smallest out-of-tree module rocm-patchkit can fetch, patch and
 * package, so that the whole pipeline runs offline on a fresh machine.
 */
#include <linux/init.h>
#include <linux/module.h>

static int __init patchkit_hello_init(void)
{
	pr_info("patchkit_hello: loaded\n");
	return 0;
}

static void __exit patchkit_hello_exit(void)
{
	pr_info("patchkit_hello: unloaded\n");
}

module_init(patchkit_hello_init);
module_exit(patchkit_hello_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("rocm-patchkit demo module");
