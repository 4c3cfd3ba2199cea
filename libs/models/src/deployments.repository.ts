import { Injectable } from '@nestjs/common';
import { PrismaService } from '@atelier/db';

/** The deployed checkpoints (deployed_models) and the checkpoint files they are served from. */
@Injectable()
export class DeploymentsRepository {
  constructor(private readonly prisma: PrismaService) {}

  /** The deployed models of this name, in every namespace. */
  deployedNamed(name: string) {
    return this.prisma.deployedModel.findMany({ where: { name, status: 'deployed' } });
  }

  /** The namespace's model of this name, whatever its status. */
  inNamespace(namespaceId: string, name: string) {
    return this.prisma.deployedModel.findUnique({ where: { namespaceId_name: { namespaceId, name } } });
  }

  /** A deployed model by its id; null when there is none or it is not deployed. */
  deployedById(id: string) {
    return this.prisma.deployedModel.findFirst({ where: { id, status: 'deployed' } });
  }

  /** Every deployed model. */
  allDeployed() {
    return this.prisma.deployedModel.findMany({ where: { status: 'deployed' } });
  }

  /** The deployed models of the namespace, and of every namespace the user owns or is a member of, oldest first. */
  visibleTo(userId: string, namespaceId: string) {
    return this.prisma.deployedModel.findMany({
      where: {
        status: 'deployed',
        OR: [{ namespaceId }, { fineTune: { namespace: { OR: [{ userId }, { org: { memberships: { some: { userId } } } }] } } }],
      },
      orderBy: { createdAt: 'asc' },
    });
  }

  checkpointFile(fineTuneId: string, step: number, path: string) {
    return this.prisma.fineTuneCheckpointFile.findUnique({ where: { fineTuneId_step_path: { fineTuneId, step, path } } });
  }

  checkpointFiles(fineTuneId: string, step: number) {
    return this.prisma.fineTuneCheckpointFile.findMany({ where: { fineTuneId, step } });
  }
}
