"""initial schema

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-22 04:41:09.976277
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "event_outbox",
        sa.Column("event_id", sa.String(length=36), nullable=False),
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.Column("key", sa.String(length=512), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created", sa.Float(), nullable=False),
        sa.Column("sent", sa.Float(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_outbox")),
        sa.UniqueConstraint("event_id", name=op.f("uq_event_outbox_event_id")),
    )
    with op.batch_alter_table("event_outbox", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_event_outbox_created"), ["created"], unique=False)
        batch_op.create_index(batch_op.f("ix_event_outbox_sent"), ["sent"], unique=False)

    op.create_table(
        "image",
        sa.Column("name", sa.String(length=512), nullable=False),
        sa.Column("tag", sa.String(length=128), nullable=False),
        sa.Column("digest", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("enacted", sa.DateTime(), nullable=True),
        sa.Column("policed", sa.DateTime(), nullable=True),
        sa.Column("backend_status", sa.Text(), nullable=False),
        sa.Column("backend_code", sa.Integer(), nullable=False),
        sa.Column("backend_handle", sa.String(length=1024), nullable=True),
        sa.Column("policy_status", sa.Text(), nullable=True),
        sa.Column("policy_code", sa.Integer(), nullable=False),
        sa.Column("xos_managed", sa.Boolean(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("backend_need_delete", sa.Boolean(), nullable=False),
        sa.Column("no_sync", sa.Boolean(), nullable=False),
        sa.Column("no_policy", sa.Boolean(), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_image")),
        sa.UniqueConstraint("name", "tag", "digest", name=op.f("uq_image_name_tag_digest")),
    )
    op.create_table(
        "service",
        sa.Column("leaf_model_name", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("kind", sa.String(length=30), nullable=False),
        sa.Column("trust_domain_id", sa.Integer(), nullable=True),
        sa.Column("kubeconfig", sa.String(length=1024), nullable=True),
        sa.Column("context", sa.String(length=253), nullable=True),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("enacted", sa.DateTime(), nullable=True),
        sa.Column("policed", sa.DateTime(), nullable=True),
        sa.Column("backend_status", sa.Text(), nullable=False),
        sa.Column("backend_code", sa.Integer(), nullable=False),
        sa.Column("backend_handle", sa.String(length=1024), nullable=True),
        sa.Column("policy_status", sa.Text(), nullable=True),
        sa.Column("policy_code", sa.Integer(), nullable=False),
        sa.Column("xos_managed", sa.Boolean(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("backend_need_delete", sa.Boolean(), nullable=False),
        sa.Column("no_sync", sa.Boolean(), nullable=False),
        sa.Column("no_policy", sa.Boolean(), nullable=False),
        sa.Column("uid", sa.String(length=64), nullable=True),
        sa.Column("resource_version", sa.String(length=64), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_service")),
        sa.UniqueConstraint("trust_domain_id", "name", name=op.f("uq_service_trust_domain_id_name")),
    )
    with op.batch_alter_table("service", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_service_uid"), ["uid"], unique=False)
        batch_op.create_index(
            "uq_service_cluster_scoped_name",
            ["name"],
            unique=True,
            sqlite_where=sa.text("trust_domain_id IS NULL"),
            postgresql_where=sa.text("trust_domain_id IS NULL"),
        )

    op.create_table(
        "site",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("login_base", sa.String(length=50), nullable=True),
        sa.Column("abbreviated_name", sa.String(length=80), nullable=True),
        sa.Column("site_url", sa.String(length=512), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("enacted", sa.DateTime(), nullable=True),
        sa.Column("policed", sa.DateTime(), nullable=True),
        sa.Column("backend_status", sa.Text(), nullable=False),
        sa.Column("backend_code", sa.Integer(), nullable=False),
        sa.Column("backend_handle", sa.String(length=1024), nullable=True),
        sa.Column("policy_status", sa.Text(), nullable=True),
        sa.Column("policy_code", sa.Integer(), nullable=False),
        sa.Column("xos_managed", sa.Boolean(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("backend_need_delete", sa.Boolean(), nullable=False),
        sa.Column("no_sync", sa.Boolean(), nullable=False),
        sa.Column("no_policy", sa.Boolean(), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_site")),
        sa.UniqueConstraint("name", name=op.f("uq_site_name")),
    )
    op.create_table(
        "service_port",
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("external_port", sa.Integer(), nullable=True),
        sa.Column("internal_port", sa.Integer(), nullable=True),
        sa.Column("protocol", sa.String(length=8), nullable=False),
        sa.Column("service_id", sa.Integer(), nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("enacted", sa.DateTime(), nullable=True),
        sa.Column("policed", sa.DateTime(), nullable=True),
        sa.Column("backend_status", sa.Text(), nullable=False),
        sa.Column("backend_code", sa.Integer(), nullable=False),
        sa.Column("backend_handle", sa.String(length=1024), nullable=True),
        sa.Column("policy_status", sa.Text(), nullable=True),
        sa.Column("policy_code", sa.Integer(), nullable=False),
        sa.Column("xos_managed", sa.Boolean(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("backend_need_delete", sa.Boolean(), nullable=False),
        sa.Column("no_sync", sa.Boolean(), nullable=False),
        sa.Column("no_policy", sa.Boolean(), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["service_id"], ["service.id"], name=op.f("fk_service_port_service_id_service"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_service_port")),
        sa.UniqueConstraint("service_id", "name", name=op.f("uq_service_port_service_id_name")),
    )
    op.create_table(
        "trust_domain",
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("enacted", sa.DateTime(), nullable=True),
        sa.Column("policed", sa.DateTime(), nullable=True),
        sa.Column("backend_status", sa.Text(), nullable=False),
        sa.Column("backend_code", sa.Integer(), nullable=False),
        sa.Column("backend_handle", sa.String(length=1024), nullable=True),
        sa.Column("policy_status", sa.Text(), nullable=True),
        sa.Column("policy_code", sa.Integer(), nullable=False),
        sa.Column("xos_managed", sa.Boolean(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("backend_need_delete", sa.Boolean(), nullable=False),
        sa.Column("no_sync", sa.Boolean(), nullable=False),
        sa.Column("no_policy", sa.Boolean(), nullable=False),
        sa.Column("uid", sa.String(length=64), nullable=True),
        sa.Column("resource_version", sa.String(length=64), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["service.id"], name=op.f("fk_trust_domain_owner_id_service"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trust_domain")),
        sa.UniqueConstraint("owner_id", "name", name=op.f("uq_trust_domain_owner_id_name")),
    )
    with op.batch_alter_table("trust_domain", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_trust_domain_uid"), ["uid"], unique=False)
    # service and trust_domain refer to each other: this key comes once both exist.
    with op.batch_alter_table("service", schema=None) as batch_op:
        batch_op.create_foreign_key(
            "fk_service_trust_domain_id_trust_domain", "trust_domain", ["trust_domain_id"], ["id"], ondelete="CASCADE"
        )

    op.create_table(
        "watch_position",
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=512), nullable=False),
        sa.Column("resource_version", sa.String(length=64), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["service.id"], name=op.f("fk_watch_position_cluster_id_service"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_watch_position")),
        sa.UniqueConstraint("cluster_id", "target", name=op.f("uq_watch_position_cluster_id_target")),
    )
    op.create_table(
        "kubernetes_config_map",
        sa.Column("trust_domain_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("data", sa.JSON(), nullable=True),
        sa.Column("keys", sa.JSON(), nullable=True),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("enacted", sa.DateTime(), nullable=True),
        sa.Column("policed", sa.DateTime(), nullable=True),
        sa.Column("backend_status", sa.Text(), nullable=False),
        sa.Column("backend_code", sa.Integer(), nullable=False),
        sa.Column("backend_handle", sa.String(length=1024), nullable=True),
        sa.Column("policy_status", sa.Text(), nullable=True),
        sa.Column("policy_code", sa.Integer(), nullable=False),
        sa.Column("xos_managed", sa.Boolean(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("backend_need_delete", sa.Boolean(), nullable=False),
        sa.Column("no_sync", sa.Boolean(), nullable=False),
        sa.Column("no_policy", sa.Boolean(), nullable=False),
        sa.Column("uid", sa.String(length=64), nullable=True),
        sa.Column("resource_version", sa.String(length=64), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["trust_domain_id"],
            ["trust_domain.id"],
            name=op.f("fk_kubernetes_config_map_trust_domain_id_trust_domain"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_kubernetes_config_map")),
        sa.UniqueConstraint("trust_domain_id", "name", name=op.f("uq_kubernetes_config_map_trust_domain_id_name")),
    )
    with op.batch_alter_table("kubernetes_config_map", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_kubernetes_config_map_uid"), ["uid"], unique=False)

    op.create_table(
        "kubernetes_secret",
        sa.Column("trust_domain_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("data", sa.JSON(), nullable=True),
        sa.Column("keys", sa.JSON(), nullable=True),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("enacted", sa.DateTime(), nullable=True),
        sa.Column("policed", sa.DateTime(), nullable=True),
        sa.Column("backend_status", sa.Text(), nullable=False),
        sa.Column("backend_code", sa.Integer(), nullable=False),
        sa.Column("backend_handle", sa.String(length=1024), nullable=True),
        sa.Column("policy_status", sa.Text(), nullable=True),
        sa.Column("policy_code", sa.Integer(), nullable=False),
        sa.Column("xos_managed", sa.Boolean(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("backend_need_delete", sa.Boolean(), nullable=False),
        sa.Column("no_sync", sa.Boolean(), nullable=False),
        sa.Column("no_policy", sa.Boolean(), nullable=False),
        sa.Column("uid", sa.String(length=64), nullable=True),
        sa.Column("resource_version", sa.String(length=64), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["trust_domain_id"],
            ["trust_domain.id"],
            name=op.f("fk_kubernetes_secret_trust_domain_id_trust_domain"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_kubernetes_secret")),
        sa.UniqueConstraint("trust_domain_id", "name", name=op.f("uq_kubernetes_secret_trust_domain_id_name")),
    )
    with op.batch_alter_table("kubernetes_secret", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_kubernetes_secret_uid"), ["uid"], unique=False)

    op.create_table(
        "principal",
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("trust_domain_id", sa.Integer(), nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("enacted", sa.DateTime(), nullable=True),
        sa.Column("policed", sa.DateTime(), nullable=True),
        sa.Column("backend_status", sa.Text(), nullable=False),
        sa.Column("backend_code", sa.Integer(), nullable=False),
        sa.Column("backend_handle", sa.String(length=1024), nullable=True),
        sa.Column("policy_status", sa.Text(), nullable=True),
        sa.Column("policy_code", sa.Integer(), nullable=False),
        sa.Column("xos_managed", sa.Boolean(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("backend_need_delete", sa.Boolean(), nullable=False),
        sa.Column("no_sync", sa.Boolean(), nullable=False),
        sa.Column("no_policy", sa.Boolean(), nullable=False),
        sa.Column("uid", sa.String(length=64), nullable=True),
        sa.Column("resource_version", sa.String(length=64), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["trust_domain_id"],
            ["trust_domain.id"],
            name=op.f("fk_principal_trust_domain_id_trust_domain"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_principal")),
        sa.UniqueConstraint("trust_domain_id", "name", name=op.f("uq_principal_trust_domain_id_name")),
    )
    with op.batch_alter_table("principal", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_principal_uid"), ["uid"], unique=False)

    op.create_table(
        "slice",
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("site_id", sa.Integer(), nullable=False),
        sa.Column("service_id", sa.Integer(), nullable=True),
        sa.Column("trust_domain_id", sa.Integer(), nullable=False),
        sa.Column("principal_id", sa.Integer(), nullable=True),
        sa.Column("controller_kind", sa.String(length=63), nullable=True),
        sa.Column("controller_replica_count", sa.Integer(), nullable=True),
        sa.Column("controller_uid", sa.String(length=64), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("max_instances", sa.Integer(), nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("enacted", sa.DateTime(), nullable=True),
        sa.Column("policed", sa.DateTime(), nullable=True),
        sa.Column("backend_status", sa.Text(), nullable=False),
        sa.Column("backend_code", sa.Integer(), nullable=False),
        sa.Column("backend_handle", sa.String(length=1024), nullable=True),
        sa.Column("policy_status", sa.Text(), nullable=True),
        sa.Column("policy_code", sa.Integer(), nullable=False),
        sa.Column("xos_managed", sa.Boolean(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("backend_need_delete", sa.Boolean(), nullable=False),
        sa.Column("no_sync", sa.Boolean(), nullable=False),
        sa.Column("no_policy", sa.Boolean(), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["principal_id"], ["principal.id"], name=op.f("fk_slice_principal_id_principal"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["service_id"], ["service.id"], name=op.f("fk_slice_service_id_service"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(["site_id"], ["site.id"], name=op.f("fk_slice_site_id_site"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["trust_domain_id"],
            ["trust_domain.id"],
            name=op.f("fk_slice_trust_domain_id_trust_domain"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_slice")),
        sa.UniqueConstraint("trust_domain_id", "name", name=op.f("uq_slice_trust_domain_id_name")),
    )
    op.create_table(
        "service_instance",
        sa.Column("leaf_model_name", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=True),
        sa.Column("trust_domain_id", sa.Integer(), nullable=True),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("enacted", sa.DateTime(), nullable=True),
        sa.Column("policed", sa.DateTime(), nullable=True),
        sa.Column("backend_status", sa.Text(), nullable=False),
        sa.Column("backend_code", sa.Integer(), nullable=False),
        sa.Column("backend_handle", sa.String(length=1024), nullable=True),
        sa.Column("policy_status", sa.Text(), nullable=True),
        sa.Column("policy_code", sa.Integer(), nullable=False),
        sa.Column("xos_managed", sa.Boolean(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("backend_need_delete", sa.Boolean(), nullable=False),
        sa.Column("no_sync", sa.Boolean(), nullable=False),
        sa.Column("no_policy", sa.Boolean(), nullable=False),
        sa.Column("uid", sa.String(length=64), nullable=True),
        sa.Column("resource_version", sa.String(length=64), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slice_id", sa.Integer(), nullable=True),
        sa.Column("image_id", sa.Integer(), nullable=True),
        sa.Column("pod_ip", sa.String(length=64), nullable=True),
        sa.Column("pod_ips", sa.JSON(), nullable=True),
        sa.Column("phase", sa.String(length=32), nullable=True),
        sa.Column("node", sa.String(length=253), nullable=True),
        sa.Column("ready", sa.Boolean(), nullable=True),
        sa.Column("restart_count", sa.Integer(), nullable=True),
        sa.Column("containers", sa.JSON(), nullable=True),
        sa.Column("labels", sa.JSON(), nullable=True),
        sa.Column("need_event", sa.Boolean(), nullable=True),
        sa.Column("last_event_sent", sa.String(length=32), nullable=True),
        sa.Column("resource_definition", sa.Text(), nullable=True),
        sa.Column("kubectl_state", sa.String(length=16), nullable=True),
        sa.Column("applied_objects", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["image_id"], ["image.id"], name=op.f("fk_service_instance_image_id_image"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["service.id"], name=op.f("fk_service_instance_owner_id_service"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["slice_id"], ["slice.id"], name=op.f("fk_service_instance_slice_id_slice"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["trust_domain_id"],
            ["trust_domain.id"],
            name=op.f("fk_service_instance_trust_domain_id_trust_domain"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_service_instance")),
    )
    with op.batch_alter_table("service_instance", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_service_instance_uid"), ["uid"], unique=False)
        batch_op.create_index(
            "uq_service_instance_pod",
            ["owner_id", "trust_domain_id", "name"],
            unique=True,
            sqlite_where=sa.text("leaf_model_name = 'KubernetesServiceInstance'"),
            postgresql_where=sa.text("leaf_model_name = 'KubernetesServiceInstance'"),
        )

    op.create_table(
        "kubernetes_config_volume_mount",
        sa.Column("config_id", sa.Integer(), nullable=False),
        sa.Column("service_instance_id", sa.Integer(), nullable=False),
        sa.Column("mount_path", sa.String(length=1024), nullable=False),
        sa.Column("sub_path", sa.String(length=1024), nullable=True),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("enacted", sa.DateTime(), nullable=True),
        sa.Column("policed", sa.DateTime(), nullable=True),
        sa.Column("backend_status", sa.Text(), nullable=False),
        sa.Column("backend_code", sa.Integer(), nullable=False),
        sa.Column("backend_handle", sa.String(length=1024), nullable=True),
        sa.Column("policy_status", sa.Text(), nullable=True),
        sa.Column("policy_code", sa.Integer(), nullable=False),
        sa.Column("xos_managed", sa.Boolean(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("backend_need_delete", sa.Boolean(), nullable=False),
        sa.Column("no_sync", sa.Boolean(), nullable=False),
        sa.Column("no_policy", sa.Boolean(), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["config_id"],
            ["kubernetes_config_map.id"],
            name=op.f("fk_kubernetes_config_volume_mount_config_id_kubernetes_config_map"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["service_instance_id"],
            ["service_instance.id"],
            name=op.f("fk_kubernetes_config_volume_mount_service_instance_id_service_instance"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_kubernetes_config_volume_mount")),
        sa.UniqueConstraint(
            "service_instance_id",
            "mount_path",
            name=op.f("uq_kubernetes_config_volume_mount_service_instance_id_mount_path"),
        ),
    )
    op.create_table(
        "kubernetes_secret_volume_mount",
        sa.Column("secret_id", sa.Integer(), nullable=False),
        sa.Column("service_instance_id", sa.Integer(), nullable=False),
        sa.Column("mount_path", sa.String(length=1024), nullable=False),
        sa.Column("sub_path", sa.String(length=1024), nullable=True),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("enacted", sa.DateTime(), nullable=True),
        sa.Column("policed", sa.DateTime(), nullable=True),
        sa.Column("backend_status", sa.Text(), nullable=False),
        sa.Column("backend_code", sa.Integer(), nullable=False),
        sa.Column("backend_handle", sa.String(length=1024), nullable=True),
        sa.Column("policy_status", sa.Text(), nullable=True),
        sa.Column("policy_code", sa.Integer(), nullable=False),
        sa.Column("xos_managed", sa.Boolean(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("backend_need_delete", sa.Boolean(), nullable=False),
        sa.Column("no_sync", sa.Boolean(), nullable=False),
        sa.Column("no_policy", sa.Boolean(), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["secret_id"],
            ["kubernetes_secret.id"],
            name=op.f("fk_kubernetes_secret_volume_mount_secret_id_kubernetes_secret"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["service_instance_id"],
            ["service_instance.id"],
            name=op.f("fk_kubernetes_secret_volume_mount_service_instance_id_service_instance"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_kubernetes_secret_volume_mount")),
        sa.UniqueConstraint(
            "service_instance_id",
            "mount_path",
            name=op.f("uq_kubernetes_secret_volume_mount_service_instance_id_mount_path"),
        ),
    )


def downgrade() -> None:
    op.drop_table("kubernetes_secret_volume_mount")
    op.drop_table("kubernetes_config_volume_mount")
    with op.batch_alter_table("service_instance", schema=None) as batch_op:
        batch_op.drop_index(
            "uq_service_instance_pod",
            sqlite_where=sa.text("leaf_model_name = 'KubernetesServiceInstance'"),
            postgresql_where=sa.text("leaf_model_name = 'KubernetesServiceInstance'"),
        )
        batch_op.drop_index(batch_op.f("ix_service_instance_uid"))

    op.drop_table("service_instance")
    op.drop_table("slice")
    with op.batch_alter_table("principal", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_principal_uid"))

    op.drop_table("principal")
    with op.batch_alter_table("kubernetes_secret", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_kubernetes_secret_uid"))

    op.drop_table("kubernetes_secret")
    with op.batch_alter_table("kubernetes_config_map", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_kubernetes_config_map_uid"))

    op.drop_table("kubernetes_config_map")
    op.drop_table("watch_position")
    with op.batch_alter_table("trust_domain", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_trust_domain_uid"))

    with op.batch_alter_table("service", schema=None) as batch_op:
        batch_op.drop_constraint("fk_service_trust_domain_id_trust_domain", type_="foreignkey")
    op.drop_table("trust_domain")
    op.drop_table("service_port")
    op.drop_table("site")
    with op.batch_alter_table("service", schema=None) as batch_op:
        batch_op.drop_index(
            "uq_service_cluster_scoped_name",
            sqlite_where=sa.text("trust_domain_id IS NULL"),
            postgresql_where=sa.text("trust_domain_id IS NULL"),
        )
        batch_op.drop_index(batch_op.f("ix_service_uid"))

    op.drop_table("service")
    op.drop_table("image")
    with op.batch_alter_table("event_outbox", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_event_outbox_sent"))
        batch_op.drop_index(batch_op.f("ix_event_outbox_created"))

    op.drop_table("event_outbox")
